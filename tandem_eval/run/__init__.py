"""The run folder: the only code that reads or writes a run folder's files.

Every stage (generate, score, report) and the CLI go through these modules; none of them opens a run
folder's files itself:

- results: `RunFolder` (records, shards, COMPLETE, the writer lock), `find_runs`, `verify_run`;
- runs: the read side (a finished run's config, samples, metrics and per-problem values, identity
  "same experiment?" between runs, where results live);
- provenance: the commit and package versions a run folder records;
- lens_layout: where the lens tables live in a run folder (RUN/lens/<junior label>/<kind>.parquet).

They read and write through tandem_eval.files (regular files only, atomic writes never through a
link, the flock folder lock), which knows files, not what a run folder means.

    from tandem_eval.run.results import RunFolder
    rf = RunFolder("runs/quick/solo")
"""
