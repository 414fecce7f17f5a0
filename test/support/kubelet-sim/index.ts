/**
 * Kubelet simulator for kubelet-less nodes in tests: admits bound pods in its own order, calls the
 * device plugin's Allocate per GPU container, reports Running / Failed(UnexpectedAdmissionError),
 * finishes graceful deletes. Shares no code with src/ (eslint.config.js enforces it).
 */
export {
  GPU_RESOURCE,
  KubeletSim,
  type AdmissionOrder,
  type DevicePluginEndpoint,
  type KubeletRecord,
  type KubeletSimOptions,
} from './kubelet-sim.js';
export { DeviceManager, DevicesUnavailableError } from './device-manager.js';
export { PodFeed, PodFeedStoppedError, type PodFeedHandlers } from './pod-feed.js';
export { kubeTime, rejectedStatus, runningStatus, terminatedStatus, UNEXPECTED_ADMISSION_ERROR } from './pod-status.js';
export { between, hashSeed, seededRandom, type Random } from './seeded-random.js';
