"""Estimators: pure functions of draws and log weights (means, errors, log Z)."""
