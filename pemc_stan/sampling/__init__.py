"""Sampling: a method's compiled model and its runs (:mod:`.model`), the fit every method's
fit extends (:mod:`.fit`, :mod:`.hooks`), the checks it is judged by (:mod:`.checks`)
and the follow-up runs within the run's budget (:mod:`.follow_up`)."""
