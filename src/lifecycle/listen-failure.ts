import { failureText } from '../telemetry/api-failure.js';
import { clip, LABEL_CHARS } from '../base/user-text.js';
import { StartupError } from './lifecycle.js';

export interface ListenerSettings {
  /** What listens, as the operator knows it: "the webhook", "the extender", "metrics". */
  role: string;
  host: string;
  port: number;
  /** The settings that chose the address and the port, e.g. WEBHOOK_HOST and WEBHOOK_PORT. */
  hostSetting: string;
  portSetting: string;
}

/** host:port as a URL would write it (IPv6 in brackets); a host too long to be real is clipped. */
export function hostPort(host: string, port: number): string {
  const shown = clip(host, LABEL_CHARS * 2);
  return `${shown.includes(':') ? `[${shown}]` : shown}:${port}`;
}

/** Why binding failed, and which of the two settings to blame for it. */
function diagnose(error: unknown): { why: string; blame: 'host' | 'port' | 'both' } {
  const code = (error as { code?: unknown } | null)?.code;
  switch (code) {
    case 'EADDRINUSE':
      return { why: 'address already in use', blame: 'port' };
    case 'EACCES':
      return { why: 'permission denied (ports below 1024 need privileges)', blame: 'port' };
    case 'EADDRNOTAVAIL':
      return { why: 'no such address on this host', blame: 'host' };
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EAI_NONAME':
      return { why: 'cannot resolve the host name', blame: 'host' };
    default:
      return { why: failureText(error), blame: 'both' };
  }
}

/**
 * The one line `serve` exits with when a listener cannot bind, e.g.
 * `cannot listen on 127.0.0.1:9444 for the extender (EXTENDER_PORT): address already in use`.
 */
export function listenFailure(settings: ListenerSettings, error: unknown): StartupError {
  const { why, blame } = diagnose(error);
  const setting =
    blame === 'host'
      ? settings.hostSetting
      : blame === 'port'
        ? settings.portSetting
        : `${settings.hostSetting}, ${settings.portSetting}`;
  return new StartupError(
    `cannot listen on ${hostPort(settings.host, settings.port)} for ${settings.role} (${setting}): ${why}`,
    { cause: error },
  );
}
