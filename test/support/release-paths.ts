/** The ways a lock whose owner is gone gets freed; each release-path suite switches the others off. */
export type ReleasePath = 'webhook' | 'watch' | 'sweeper' | 'takeover';

export const RELEASE_PATHS: readonly ReleasePath[] = ['webhook', 'watch', 'sweeper', 'takeover'];

const OFF = { POD_WATCH_ENABLED: 'false', SWEEP_ENABLED: 'false' };

/** vgpu-warden settings that leave only `path` able to free the lock (webhook and takeover: no background path). */
export const PATH_ONLY: Readonly<Record<ReleasePath, Record<string, string>>> = {
  webhook: OFF,
  watch: { ...OFF, POD_WATCH_ENABLED: 'true' },
  sweeper: { ...OFF, SWEEP_ENABLED: 'true', SWEEP_SCHEDULE: '* * * * * *' },
  takeover: OFF,
};
