// The Node options manifests/deployment.yaml gives serve (V8's heap limit and young-generation
// size), so that a benchmark measures serve's memory and latency as it runs deployed, not with the
// sizes V8 picks from this machine's 24 GiB.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { loadAllYaml, type V1Deployment } from '@kubernetes/client-node';

const DEPLOYMENT = resolve(import.meta.dirname, '..', '..', 'manifests', 'deployment.yaml');

export function deployedNodeOptions(): string {
  const objects = loadAllYaml(readFileSync(DEPLOYMENT, 'utf8')) as { kind?: string }[];
  const warden = objects.find(
    (object): object is V1Deployment =>
      object.kind === 'Deployment' && (object as V1Deployment).metadata?.name === 'vgpu-warden',
  );
  const container =
    warden?.spec?.template.spec?.containers.find((candidate) => candidate.name === 'vgpu-warden') ??
    warden?.spec?.template.spec?.containers[0];
  const value = container?.env?.find((variable) => variable.name === 'NODE_OPTIONS')?.value;
  if (value === undefined) throw new Error(`${DEPLOYMENT}: the vgpu-warden Deployment sets no NODE_OPTIONS`);
  return value;
}
