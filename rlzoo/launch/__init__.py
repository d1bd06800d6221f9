"""Launching a run, below the entry points and above ``rlzoo.run``: claim its dir (claim.py),
its seed group's member dirs (members.py), the checks of a resume (resume.py), training it into
its dir (execute.py), and the Python API ``rlzoo.train`` / ``rlzoo.resume`` (api.py).
"""
