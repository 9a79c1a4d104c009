"""Validation of inputs and release drafts (Great Expectations suites). Imports only
``anonymizer``."""
