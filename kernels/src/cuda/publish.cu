// Publication: the sorted state packed into particle-id order as float32 (the frame layout of
// shm-protocol), into a device staging buffer that a copy stream then moves to the host.
// Mirrors Backend::begin_kinematics_copy's CPU default (positions, velocities, angular
// velocities, last contact force and contact count, by id). Null outputs are skipped; arrays the
// state does not hold (no rotation, forces not stored) are written as zeros.

extern "C" __global__ void dem_pack(const DemParams p, const ParticleArrays s, float* pos, float* vel, float* omega,
                                    float* force, unsigned* contacts) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= p.n) return;
    unsigned i = s.id[k];
    if (i == DEM_DEAD) return;  // a ghost's slot (several GPUs): its owner packs it
    if (pos)
        for (int a = 0; a < 3; a++) pos[3 * i + a] = (float)s.pos[3 * k + a];
    if (vel)
        for (int a = 0; a < 3; a++) vel[3 * i + a] = (float)s.vel[3 * k + a];
    if (omega)
        for (int a = 0; a < 3; a++) omega[3 * i + a] = s.omega ? (float)s.omega[3 * k + a] : 0.0f;
    if (force)
        for (int a = 0; a < 3; a++) force[3 * i + a] = s.force ? (float)s.force[3 * k + a] : 0.0f;
    if (contacts) contacts[i] = s.contacts ? s.contacts[k] : 0u;
}
