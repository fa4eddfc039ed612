"""Running one claimed period: its command's argv and environment or its call's
context, the process group or the call thread, the timeout and the stop, whether the job can
start at all, and the tail of its output kept."""
