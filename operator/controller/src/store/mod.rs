//! The cluster's artifact stores behind the engine's `ArtifactStore` port: ConfigMaps
//! (the default) and object storage (S3, GCS, Azure); [`routed`] picks between them per write.

pub mod configmap;
pub mod object;
pub mod routed;
