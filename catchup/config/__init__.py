"""What ``catchup.toml`` says, read and checked: the jobs (``Job``, ``Config``), each
``[jobs.NAME]`` setting and its bounds, the lanes, the line every key was written on, the value
parsers shared with the command line, the dependencies between jobs (``after``), and a
long-running process's config read again when it changes. Pure but for reading the file."""
