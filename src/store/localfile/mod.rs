//! Local-file tier (placeholder until the tier lands).
