//! particle-shm solver library: case configuration, DEM physics, backends, publishing.
