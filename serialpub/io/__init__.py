"""Reading and writing files: inputs (register, snapshots), hierarchies, release folders
and the statistics file's codec (docs/design.md section 9)."""
