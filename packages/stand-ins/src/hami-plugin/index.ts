/**
 * HAMi device-plugin stand-in for tests: written from the wire contract, sharing no code with src/
 * (eslint.config.js enforces it). Start with HamiDevicePlugin; GrpcDevicePluginServer puts it on
 * kubelet's real device-plugin API (v1beta1 gRPC) for one node. The pure pieces (codec, lock
 * parsing, GetPendingPod) are exported for unit tests and for checking records against the wire.
 */
export {
  AllocateError,
  HamiDevicePlugin,
  PluginOptionsError,
  PluginStoppedError,
  type Admission,
  type AdmittedFields,
  type AllocateAction,
  type AllocateRecord,
  type AllocateRecordFields,
  type AllocateRequest,
  type AllocateRequestFields,
  type AllocateResponse,
  type HamiDevicePluginOptions,
  type KubeletDevice,
  type PodIdentity,
  type PreferredAllocationRequest,
} from './device-plugin.js';
export {
  DEFAULT_RESOURCE_NAME,
  DEFAULT_SOCKET_NAME,
  GrpcDevicePluginServer,
  type DevicePluginMethod,
  type GrpcDevicePluginServerOptions,
  type GrpcPluginEvent,
} from './grpc-device-plugin.js';
export * as deviceplugin from './grpc-api.js';
export { goTimeString, NODE_HANDSHAKE, reportedHandshake, requestingHandshake } from './handshake.js';
export { decodeRegisteredGpus, replicaIds, InventoryFormatError, type RegisteredGpu } from './device-inventory.js';
export {
  isLockOwnedBy,
  LockParseError,
  NodeLockReleaseError,
  parseGoRfc3339,
  parseNodeLock,
  releaseNodeLock,
  type HamiLockValue,
  type ReleaseOutcome,
} from './node-lock.js';
export { getPendingPod, PendingPodError, type PendingPod, type PendingPodOptions } from './pending-pod.js';
export {
  containerRequest,
  oversizedAllocation,
  wholeQuantity,
  type ContainerRequest,
  type RequestDefaults,
} from './container-request.js';
export { MemoryApiError, MemoryPluginApi, type MemoryCall } from './memory-plugin-api.js';
export { pluginApiFromCore, type PluginApi } from './plugin-api.js';
export {
  decodeContainerDevices,
  decodePodDevices,
  encodePodDevices,
  eraseNextDeviceRequest,
  MISSING_FIELDS,
  nextDeviceRequest,
  PodDevicesFormatError,
  type HamiDevice,
  type NextDeviceRequest,
  type PodDeviceEntries,
} from './pod-devices.js';
export * as wire from './wire.js';
export { encodeNodeRegister, mockGpus, registerNode, type MockGpu } from './node-register.js';
