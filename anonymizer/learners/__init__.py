"""The learning adversary (docs/threat-model.md, "The learning adversary"): learners fitted
on published groups and the register, and their posteriors beside the uniform charge.
One implementation for every reader of a series: the audit (from a public copy), the
planner (a candidate series in memory) and the release report (the releases published so
far and the draft)."""
