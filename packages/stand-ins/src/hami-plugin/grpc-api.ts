/**
 * kubelet's device-plugin API `k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1`, loaded from the vendored
 * proto (./proto/api.proto, from k8s.io/kubelet@v0.34.4) with @grpc/proto-loader, and typed by hand
 * for the fields this stand-in uses. Loaded with keepCase, so the field names are the proto's own
 * (`devices_ids`, `available_deviceIDs`, `ID`), as kubelet's grpc-go client puts them on the wire.
 * Constants are those of the module's constants.go.
 */
import { fileURLToPath } from 'node:url';
import type { MethodDefinition, ServiceDefinition } from '@grpc/grpc-js';
import { loadSync, type Options, type PackageDefinition } from '@grpc/proto-loader';

/** The vendored api.proto. */
export const DEVICE_PLUGIN_PROTO = fileURLToPath(new URL('./proto/api.proto', import.meta.url));

/** constants.go: the API version a plugin registers with, and device health values. */
export const API_VERSION = 'v1beta1';
export const HEALTHY = 'Healthy';
export const UNHEALTHY = 'Unhealthy';
/** constants.go KubeletSocket's file name inside the device-plugin folder. */
export const KUBELET_SOCKET = 'kubelet.sock';

/** How both sides load the proto (field names as written in it; unset fields get their defaults). */
export const PROTO_LOADER_OPTIONS: Options = {
  keepCase: true,
  defaults: true,
  arrays: true,
  objects: true,
  longs: String,
  enums: String,
  oneofs: true,
};

export interface DevicePluginOptions {
  pre_start_required: boolean;
  get_preferred_allocation_available: boolean;
}

export interface RegisterRequest {
  version: string;
  endpoint: string;
  resource_name: string;
  options: DevicePluginOptions | null;
}

export type Empty = Record<string, never>;

export interface Device {
  ID: string;
  health: string;
  topology?: { nodes: { ID: string }[] } | null;
}

export interface ListAndWatchResponse {
  devices: Device[];
}

export interface ContainerPreferredAllocationRequest {
  available_deviceIDs: string[];
  must_include_deviceIDs: string[];
  allocation_size: number;
}

export interface PreferredAllocationRequest {
  container_requests: ContainerPreferredAllocationRequest[];
}

export interface PreferredAllocationResponse {
  container_responses: { deviceIDs: string[] }[];
}

export interface ContainerAllocateRequest {
  devices_ids: string[];
}

export interface AllocateRequest {
  container_requests: ContainerAllocateRequest[];
}

export interface Mount {
  container_path: string;
  host_path: string;
  read_only: boolean;
}

export interface DeviceSpec {
  container_path: string;
  host_path: string;
  permissions: string;
}

export interface ContainerAllocateResponse {
  envs: Record<string, string>;
  mounts: Mount[];
  devices: DeviceSpec[];
  annotations: Record<string, string>;
  cdi_devices: { name: string }[];
}

export interface AllocateResponse {
  container_responses: ContainerAllocateResponse[];
}

export interface PreStartContainerRequest {
  devices_ids: string[];
}

export type PreStartContainerResponse = Record<string, never>;

let loaded: PackageDefinition | undefined;

export function devicePluginPackage(): PackageDefinition {
  loaded ??= loadSync(DEVICE_PLUGIN_PROTO, PROTO_LOADER_OPTIONS);
  return loaded;
}

/** A service of the package (`Registration` or `DevicePlugin`) as grpc-js serves or calls it. */
export function devicePluginService(name: 'Registration' | 'DevicePlugin'): ServiceDefinition {
  const found = devicePluginPackage()[`v1beta1.${name}`];
  if (found === undefined || 'format' in found)
    throw new Error(`v1beta1.${name} is not a service in ${DEVICE_PLUGIN_PROTO}`);
  return found;
}

/** One method of a service, typed by its caller. */
export function devicePluginMethod<Request, Response>(
  service: 'Registration' | 'DevicePlugin',
  method: string,
): MethodDefinition<Request, Response> {
  const found = devicePluginService(service)[method];
  if (found === undefined) throw new Error(`v1beta1.${service} has no method ${method}`);
  return found as MethodDefinition<Request, Response>;
}
