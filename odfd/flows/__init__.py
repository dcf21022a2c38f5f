"""``Flow`` resources (RFC-018 ``flow/v1alpha1``): their triggers, the tasks they run, and the
record of each run."""
