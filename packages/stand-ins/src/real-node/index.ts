/**
 * Real Kubernetes nodes on this machine (kubelet and containerd each, in namespaces of their own),
 * for tests and local mode; written against the kubelet and containerd, sharing no code with the
 * product. The caller supplies the process runner (ProcessHost).
 */
export type { HostProcess, HostProcessOptions, ProcessHost, ShutdownRegistry } from './process-host.js';
export { TEST_IMAGE } from './node-image.js';
export { locateRealNodeTools, type RealNodeTools } from './node-tools.js';
export { MissingToolError, RealNodeError } from './real-node-error.js';
export { RealNodeFleet, type RealNodeFleetOptions, type RealNodeSpec } from './real-node-fleet.js';
export { RealNode, type NodeClusterAccess, type RealNodeOptions } from './real-node.js';
