/**
 * Ages the way kubectl prints them (its HumanDuration), so `vgpu-warden locks` reads like
 * `kubectl get`: exact seconds under two minutes, minutes and seconds under ten minutes, then
 * coarser units as the age grows ("45s", "3m12s", "2h5m", "3d4h").
 */
export function formatAge(seconds: number | undefined): string {
  if (seconds === undefined || !Number.isFinite(seconds)) return '<unknown>';
  const whole = Math.trunc(seconds);
  // A second or two in the future is clock skew between machines: "now" is the honest answer.
  if (whole < -1) return '<invalid>';
  if (whole < 0) return '0s';
  if (whole < 120) return `${whole}s`;
  const minutes = Math.floor(whole / 60);
  if (minutes < 10) return withRest(minutes, 'm', whole % 60, 's');
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 8) return withRest(hours, 'h', minutes % 60, 'm');
  if (hours < 48) return `${hours}h`;
  const days = Math.floor(hours / 24);
  if (hours < 24 * 8) return withRest(days, 'd', hours % 24, 'h');
  if (hours < 24 * 365 * 2) return `${days}d`;
  const years = Math.floor(days / 365);
  if (hours < 24 * 365 * 8) return withRest(years, 'y', days % 365, 'd');
  return `${years}y`;
}

function withRest(major: number, majorUnit: string, minor: number, minorUnit: string): string {
  return minor === 0 ? `${major}${majorUnit}` : `${major}${majorUnit}${minor}${minorUnit}`;
}
