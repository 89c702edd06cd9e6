"""Example cluster policies written in Python (see :mod:`coscheduling.pypolicy` for the protocol).

- ``python:coscheduling.pypolicies.fcfs:Fcfs``: first come, first served (the Rust ``fcfs``, line by line);
- ``python:coscheduling.pypolicies.sjf:ShortestJobFirst[backfill=True]``: shortest estimate first, with
  EASY-style backfilling behind the head's reservation.
"""
