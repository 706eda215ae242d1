"""Integrations with the eval frameworks people already run, loaded by the framework itself.

Each runs inside the user's eval: it records and governs, and never changes what the eval does.

    inspect_hooks  Inspect AI (its ``inspect_ai`` entry point): a governed cell per sample and epoch
"""
