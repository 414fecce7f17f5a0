/**
 * Base class for every error vgpu-warden raises on purpose. Subclasses name the failure; `cause`
 * carries the lower-level error so logs keep the whole chain.
 */
export class WardenError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Renders an error and its cause chain on one line, for CLI output and log fields. */
export function describeError(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; current !== undefined && current !== null && depth < 5; depth++) {
    if (current instanceof Error) {
      // A wrapper that already quotes its cause's message (a bind that waited, then gave up) says it once.
      const message = current.message;
      if (!parts.some((part) => part.includes(message))) parts.push(message);
      current = current.cause;
    } else {
      parts.push(typeof current === 'string' ? current : JSON.stringify(current));
      current = undefined;
    }
  }
  return parts.join(': caused by: ');
}
