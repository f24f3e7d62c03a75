//! Pure rendering of versioned Deployments.
