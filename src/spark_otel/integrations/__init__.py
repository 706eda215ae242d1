"""Integrations with the eval frameworks people already run, loaded by the framework itself.

Each runs inside the user's eval: it records and governs, and never changes what the eval does.
"""
