import { createHash, randomBytes } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { runCommand } from './run-command.js';

/** The CRI sandbox ("pause") image of every real node: busybox sleeping, which is all a sandbox does. */
export const SANDBOX_IMAGE = 'registry.k8s.io/pause:3.10';
/** The image test pods run (imagePullPolicy: Never): static busybox with its applets, sh on PATH. */
export const TEST_IMAGE = 'vgpu-warden.local/busybox:1';

export interface ImageSpec {
  name: string;
  entrypoint?: string[];
  cmd?: string[];
}

export const NODE_IMAGES: readonly ImageSpec[] = [
  // Runs until the sandbox is killed (SIGKILL by containerd): about 68 years.
  { name: SANDBOX_IMAGE, entrypoint: ['/bin/sleep', '2147483647'] },
  { name: TEST_IMAGE, cmd: ['sh'] },
];

export interface Blob {
  digest: string;
  bytes: Buffer;
}

const sha256 = (bytes: Buffer) => `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
const jsonBlob = (value: unknown): Blob => {
  const bytes = Buffer.from(JSON.stringify(value));
  return { digest: sha256(bytes), bytes };
};

export function ociArchitecture(nodeArch: string): string {
  const known: Record<string, string> = {
    x64: 'amd64',
    arm64: 'arm64',
    arm: 'arm',
    ppc64: 'ppc64le',
    s390x: 's390x',
    riscv64: 'riscv64',
  };
  return known[nodeArch] ?? nodeArch;
}

/**
 * The OCI documents of an image layout in which every image shares one uncompressed layer: a config
 * and a manifest per image, and an index naming each manifest by `io.containerd.image.name`, the
 * annotation `ctr images import` tags imported images with.
 */
export function ociImageDocuments(
  layer: { digest: string; size: number },
  images: readonly ImageSpec[],
  architecture: string,
): { index: unknown; blobs: Blob[] } {
  const blobs: Blob[] = [];
  const manifests = images.map((image) => {
    const config = jsonBlob({
      architecture,
      os: 'linux',
      config: {
        Env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'],
        WorkingDir: '/',
        ...(image.entrypoint ? { Entrypoint: image.entrypoint } : {}),
        ...(image.cmd ? { Cmd: image.cmd } : {}),
      },
      rootfs: { type: 'layers', diff_ids: [layer.digest] },
    });
    const manifest = jsonBlob({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: {
        mediaType: 'application/vnd.oci.image.config.v1+json',
        digest: config.digest,
        size: config.bytes.length,
      },
      layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar', digest: layer.digest, size: layer.size }],
    });
    blobs.push(config, manifest);
    return {
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      digest: manifest.digest,
      size: manifest.bytes.length,
      platform: { architecture, os: 'linux' },
      annotations: { 'io.containerd.image.name': image.name, 'org.opencontainers.image.ref.name': image.name },
    };
  });
  return { index: { schemaVersion: 2, mediaType: 'application/vnd.oci.image.index.v1+json', manifests }, blobs };
}

const PASSWD = 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n';
const GROUP = 'root:x:0:\nnogroup:x:65534:\n';

export interface NodeImageTools {
  busybox: string;
  tar: string;
}

/**
 * The OCI archive `ctr images import` loads into every node (there is no registry to pull from):
 * built once into `dir` and reused while the file is there. Deterministic (sorted entries, zero
 * mtimes), so concurrent builders write the same bytes and the rename of either is fine.
 */
export async function ensureNodeImage(dir: string, tools: NodeImageTools): Promise<string> {
  const archive = join(dir, 'node-images.oci.tar');
  if (existsSync(archive)) return archive;
  const work = join(dir, `.image-build-${randomBytes(4).toString('hex')}`);
  try {
    const rootfs = join(work, 'rootfs');
    for (const folder of ['bin', 'etc', 'proc', 'sys', 'dev', 'tmp', 'root', 'var'])
      mkdirSync(join(rootfs, folder), { recursive: true, mode: folder === 'tmp' ? 0o1777 : 0o755 });
    copyFileSync(tools.busybox, join(rootfs, 'bin', 'busybox'));
    const applets = (await runCommand(tools.busybox, ['--list-full']))
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== '' && line !== 'bin/busybox');
    for (const applet of applets) {
      const link = join(rootfs, applet);
      mkdirSync(dirname(link), { recursive: true });
      if (!existsSync(link)) symlinkSync('/bin/busybox', link);
    }
    writeFileSync(join(rootfs, 'etc', 'passwd'), PASSWD);
    writeFileSync(join(rootfs, 'etc', 'group'), GROUP);

    const layout = join(work, 'layout');
    const blobDir = join(layout, 'blobs', 'sha256');
    mkdirSync(blobDir, { recursive: true });
    const layerFile = join(work, 'layer.tar');
    await runCommand(tools.tar, [
      '--create',
      `--file=${layerFile}`,
      `--directory=${rootfs}`,
      '--numeric-owner',
      '--owner=0',
      '--group=0',
      '--sort=name',
      '--mtime=@0',
      '.',
    ]);
    const layerBytes = readFileSync(layerFile);
    const layer = { digest: sha256(layerBytes), size: layerBytes.length };
    renameSync(layerFile, join(blobDir, layer.digest.slice('sha256:'.length)));
    const { index, blobs } = ociImageDocuments(layer, NODE_IMAGES, ociArchitecture(process.arch));
    for (const blob of blobs) writeFileSync(join(blobDir, blob.digest.slice('sha256:'.length)), blob.bytes);
    writeFileSync(join(layout, 'index.json'), JSON.stringify(index));
    writeFileSync(join(layout, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
    const partial = join(work, 'archive.tar');
    await runCommand(tools.tar, [
      '--create',
      `--file=${partial}`,
      `--directory=${layout}`,
      '--sort=name',
      '--mtime=@0',
      '--numeric-owner',
      '--owner=0',
      '--group=0',
      'oci-layout',
      'index.json',
      'blobs',
    ]);
    renameSync(partial, archive);
    return archive;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
