/** A real node (namespace, containerd, kubelet) did not start, or could not be torn down completely. */
export class RealNodeError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A program a real node needs is missing (not built, or its Debian package not installed). */
export class MissingToolError extends RealNodeError {}

/** An error and its causes on one line, each message once. */
export function errorChain(error: unknown): string {
  const messages: string[] = [];
  for (let current = error, depth = 0; current !== undefined && current !== null && depth < 5; depth++) {
    const message = current instanceof Error ? current.message : JSON.stringify(current);
    if (!messages.some((seen) => seen.includes(message))) messages.push(message);
    current = current instanceof Error ? current.cause : undefined;
  }
  return messages.join(': caused by: ');
}
