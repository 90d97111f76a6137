"""Pipeline stages (issue 32, DESIGN.md §8.4): a model split into contiguous stages that each fit a
device, trained GPipe-style and replayed one stage at a time from the tensors it received."""
