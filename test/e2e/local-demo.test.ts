import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { expect } from 'chai';

const main = resolve(import.meta.dirname, '..', '..', 'src', 'main.ts');

describe('vgpu-warden local --demo seed (the README main job, headless)', function () {
  this.timeout(180_000);

  it('runs the seed scenario on a fresh local cluster, reports the replacement bound and exits 0', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', main, 'local', '--demo', 'seed', '--exit-after-demo', '--gpu-nodes', '1', '--no-view'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => { output += chunk.toString(); });
    child.stderr.on('data', (chunk: Buffer) => { output += chunk.toString(); });
    const code = await new Promise<number | null>((done) => { child.once('exit', (exitCode) => { done(exitCode); }); });
    console.log(output.split('\n').filter((line) => line.includes('seed demo')).map((line) => `        ${line}`).join('\n'));
    expect(code, output).to.equal(0);
    const bound = /replacement pod seed-replacement bound to gpu-node-1 and allocated (\d+) ms after the delete/.exec(output);
    expect(bound, output).to.not.equal(null);
    expect(Number(bound?.[1])).to.be.below(10_000);
    expect(output).to.include('demo finished; stopping');
  });

  it('stops on Ctrl-C (SIGINT) with vgpu-warden first, so nothing complains of a vanished apiserver, and exits 130', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', main, 'local', '--gpu-nodes', '1', '--no-view'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const ready = new Promise<void>((done) => {
      const onData = (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('press Ctrl-C to stop')) done();
      };
      child.stdout.on('data', onData);
      child.stderr.on('data', onData);
    });
    const exited = new Promise<number | null>((done) => { child.once('exit', (exitCode) => { done(exitCode); }); });
    await Promise.race([ready, exited]);
    const before = output.length;
    child.kill('SIGINT');
    const code = await exited;
    const stopping = output.slice(before);
    expect(code, output).to.equal(130);
    expect(stopping, 'the newest resource stops first').to.match(/received SIGINT; stopping vgpu-warden.*control plane/);
    expect(stopping, stopping).to.not.match(/unreachable|could not write Event|ECONNREFUSED/i);
  });
});
