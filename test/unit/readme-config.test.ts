import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { expect } from 'chai';
import { SETTINGS } from '../../src/config.js';

describe('README configuration table', () => {
  const readme = readFileSync(resolve(import.meta.dirname, '..', '..', 'README.md'), 'utf8');

  for (const spec of SETTINGS) {
    it(`documents ${spec.env} with its flag, default and meaning`, () => {
      const row = readme.split('\n').find((line) => line.startsWith(`| \`${spec.env}\``));
      expect(row, `no README row for ${spec.env}`).to.be.a('string');
      const cells = (row ?? '').split('|').map((cell) => cell.trim());
      expect(cells[2]).to.equal(`\`--${spec.flag}\``);
      const documented = spec.defaultValue === undefined ? 'unset' : spec.defaultValue === '' ? 'empty' : `\`${spec.defaultValue}\``;
      expect(cells[3]).to.equal(documented);
      expect(cells[4]).to.equal(spec.description);
      const aliases: readonly string[] = ('aliases' in spec ? spec.aliases : undefined) ?? [];
      for (const alias of aliases) expect(cells[1]).to.include(alias);
    });
  }
});
