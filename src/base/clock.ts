/**
 * The one clock type: milliseconds since the epoch, as `Date.now` gives them. Services take one in
 * their dependencies so that tests can stop or move time; a Date is made from it where one is needed.
 */
export type Clock = () => number;

/** This machine's clock. */
export const systemClock: Clock = () => Date.now();
