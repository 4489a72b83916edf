"""`invoke test-hw` on a real Intel machine: the preflight, host operations and the report
(hwtest), the steps (hwtest_steps), and the run from end to end (run)."""
