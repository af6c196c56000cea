"""Answers from the database: the results frame (frame.py) and what is read from it."""
