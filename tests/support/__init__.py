"""Builders and servers the tests share: one home for each, so no test module imports another.

gauges   a gauge's verdict built by hand, with every figure not given left empty
"""
