"""Learned selectors: the NDE delay-and-branch selector of the delayed-tree paper (Sec. 6,
Appendix E) in nde.py, its training data in nde_data.py; training in engine/train/nde.py."""
