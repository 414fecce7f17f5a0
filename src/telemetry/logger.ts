import { pino, type Logger } from 'pino';
import type { LogLevel } from '../config/setting-spec.js';

export type { Logger };

/** JSON logs on stdout, one object per line; components get child loggers with their name. */
export function createLogger(level: LogLevel, destination?: NodeJS.WritableStream): Logger {
  return pino(
    { level, base: { app: 'vgpu-warden' }, timestamp: pino.stdTimeFunctions.isoTime },
    destination ?? process.stdout,
  );
}
