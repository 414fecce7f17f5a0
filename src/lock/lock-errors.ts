import { WardenError } from '../base/errors.js';
import type { LockClassification } from './lock-rules.js';
import { formatAge } from '../base/human-age.js';
import { podKey, quoteForMessage, type LockValue, type PodRef } from './lock-value.js';

/** Base class for node-lock failures. */
export class NodeLockError extends WardenError {}

export class NodeNotFoundError extends NodeLockError {
  constructor(
    readonly node: string,
    options?: { cause?: unknown },
  ) {
    super(`node ${node} not found`, options);
  }
}

/** The RV-guarded write lost a race (HTTP 409): someone changed the node since we read it. */
export class WriteConflictError extends NodeLockError {}

/** The API refused the write for good (e.g. 403, 422): retrying cannot help, and nothing was written. */
export class WriteRejectedError extends NodeLockError {}

function describeHolder(value: LockValue): string {
  switch (value.kind) {
    case 'owned':
      return `pod ${podKey(value.owner)}`;
    case 'legacy':
      return 'a legacy lock with no owner';
    case 'malformed':
      return `an unreadable value ${quoteForMessage(value.raw)}`;
  }
}

/**
 * A stamp ahead of our clock (a skewed writer, or a planted value): the age is counted from when the
 * lock was first seen, and the message says so instead of printing "0s old" forever.
 */
function stampAhead(classification: LockClassification): string {
  const skewMs = classification.clockSkewMs ?? 0;
  return skewMs < 2000 ? '' : ` since first seen, its stamp ${formatAge(skewMs / 1000)} in the future`;
}

/** Another pod holds the node's lock; the message names the holder and the lock's age. */
export class LockContentionError extends NodeLockError {
  constructor(
    readonly node: string,
    readonly requester: PodRef,
    readonly holder: LockValue,
    readonly classification: LockClassification,
  ) {
    const age =
      classification.ageMs === undefined
        ? 'unknown age'
        : `${Math.round(classification.ageMs / 1000)}s old${stampAhead(classification)}`;
    super(
      `node ${node} is locked by ${describeHolder(holder)} (${age}, ${classification.state}: ` +
        `${classification.reason}); ${podKey(requester)} must wait`,
    );
  }
}

/**
 * The lock is free, but the node is not ready for the next pod yet (an acquire precondition said
 * so: kubelet has not acknowledged an allocation there). Waited for like a held lock.
 */
export class NodeBusyError extends NodeLockError {
  constructor(
    readonly node: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The lock could not be written or read back within the retry budget. */
export class LockUnavailableError extends NodeLockError {}

/**
 * acquire() failed after it had sent a lock write whose outcome it could not learn (a lost answer,
 * then a failed or aborted re-read): one of `written` may be on the node now. The caller, who knows
 * whether its pod can still use the lock, must release exactly those values if it cannot.
 */
export class LockOutcomeUnknownError extends NodeLockError {
  constructor(
    message: string,
    readonly written: readonly string[],
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
