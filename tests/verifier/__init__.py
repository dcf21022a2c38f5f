"""Tests of the verifier layer."""
