import { WardenError } from '../../base/errors.js';

/** A real node (namespace, containerd, kubelet) did not start, or could not be torn down completely. */
export class RealNodeError extends WardenError {}
