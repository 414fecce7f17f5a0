import { readFileSync } from 'node:fs';

/**
 * The package's version, from the package.json beside the build: src/telemetry/ and
 * dist/telemetry/ both sit two levels below it (in the image, /app/package.json). Read once at
 * start by main (for `--version`) and by serve (for vgpu_warden_build_info); "unknown" when the
 * file cannot be read or names no version.
 */
export function packageVersion(packageJson: URL = new URL('../../package.json', import.meta.url)): string {
  try {
    const { version } = JSON.parse(readFileSync(packageJson, 'utf8')) as { version?: unknown };
    return typeof version === 'string' && version !== '' ? version : 'unknown';
  } catch {
    return 'unknown';
  }
}
