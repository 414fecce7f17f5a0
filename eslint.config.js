// Type-aware lint for the whole project: sources, tests and benchmarks.
import { dirname, isAbsolute, relative, resolve } from 'node:path';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const srcDir = resolve(import.meta.dirname, 'src');
/**
 * The stand-ins for other products (the HAMi device plugin, real nodes): a workspace package of their
 * own, sharing nothing with src/, and reached from src/ only by the local command's run, lazily.
 */
const STAND_INS = 'packages/stand-ins';
const STAND_INS_PACKAGE = '@vgpu-warden/stand-ins';
/** The one module of src/ that may reach the stand-ins: loaded lazily itself (local-command.ts). */
const LAZY_ENTRY = resolve(import.meta.dirname, 'src/commands/local-run.ts');

/** Whether `target` is `dir` or inside it. */
const within = (dir, target) => {
  const path = relative(dir, target);
  return path === '' || (!path.startsWith('..') && !isAbsolute(path));
};

/**
 * The visitors of every form a module specifier takes (static and dynamic imports, re-exports,
 * `import type`, `import x = require()`, `typeof import()`): each string specifier is handed to
 * `visit` with its literal node and whether the form loads nothing at start (`import()`, or types only).
 */
const moduleSpecifiers = (visit) => {
  const literalOf = (node) => {
    const literal = node?.type === 'TSLiteralType' ? node.literal : node;
    return literal?.type === 'Literal' && typeof literal.value === 'string' ? literal : undefined;
  };
  const at = (node, lazy) => {
    const literal = literalOf(node);
    if (literal !== undefined) visit(literal, lazy);
  };
  return {
    ImportDeclaration: (node) => {
      at(node.source, node.importKind === 'type');
    },
    ExportNamedDeclaration: (node) => {
      at(node.source, node.exportKind === 'type');
    },
    ExportAllDeclaration: (node) => {
      at(node.source, node.exportKind === 'type');
    },
    ImportExpression: (node) => {
      at(node.source, true);
    },
    TSExternalModuleReference: (node) => {
      at(node.expression, false);
    },
    TSImportType: (node) => {
      at(node.argument, true);
    },
  };
};

/**
 * Each relative or absolute module specifier (moduleSpecifiers), resolved against the importing
 * file, handed to `check` with its literal node for the report.
 */
const relativeSpecifiers = (context, check) =>
  moduleSpecifiers((literal) => {
    const specifier = literal.value;
    if (!specifier.startsWith('.') && !isAbsolute(specifier)) return;
    check(literal, specifier, resolve(dirname(context.filename), specifier));
  });

/**
 * The stand-ins package (the HAMi device plugin, real nodes) and the kubelet simulator check src/
 * from the outside: a constant or codec shared with src/ would make a bug symmetric and invisible.
 * This rule resolves every relative or absolute module specifier (static and dynamic imports,
 * re-exports, `import type`, `import x = require()`, `typeof import()`) against the importing file
 * and reports any that lands in src/. no-restricted-imports matches specifier text only and skips
 * dynamic imports, hence a rule.
 */
const noSrcImports = {
  meta: {
    type: 'problem',
    docs: { description: 'forbid modules that resolve into src/' },
    schema: [],
    messages: {
      intoSrc:
        '"{{specifier}}" resolves into src/; this code must share nothing with src/ (write it from the wire contract, or take what it needs through a port).',
    },
  },
  create(context) {
    return relativeSpecifiers(context, (literal, specifier, target) => {
      if (within(srcDir, target)) {
        context.report({ node: literal, messageId: 'intoSrc', data: { specifier } });
      }
    });
  },
};

/**
 * src/ reaches the stand-ins package only from the local command's run (LAZY_ENTRY, itself loaded
 * with import()), and there only with import() or `import type`: `serve` and the image never load
 * it (the image does not hold it). Checks the package's name in every form a specifier takes.
 */
const standInsOnlyLazily = {
  meta: {
    type: 'problem',
    docs: { description: 'src/ reaches the stand-ins package only lazily, from the local command' },
    schema: [],
    messages: {
      elsewhere:
        '"{{specifier}}" is the stand-ins package: only src/commands/local-run.ts may reach it (the product does not hold it).',
      statically:
        '"{{specifier}}" is the stand-ins package: load it with import() (or import type), so that only local mode loads it.',
    },
  },
  create(context) {
    if (!within(srcDir, context.filename)) return {};
    return moduleSpecifiers((literal, lazy) => {
      const specifier = literal.value;
      if (specifier !== STAND_INS_PACKAGE && !specifier.startsWith(`${STAND_INS_PACKAGE}/`)) return;
      if (context.filename !== LAZY_ENTRY)
        context.report({ node: literal, messageId: 'elsewhere', data: { specifier } });
      else if (!lazy) context.report({ node: literal, messageId: 'statically', data: { specifier } });
    });
  },
};

/**
 * The layers of src/ (docs/architecture.md, "Layers"), bottom first. A module may import from its
 * own folder and from folders of earlier layers only; folders sharing a layer (the three features)
 * never import each other. Files directly in src/ (bin.ts, main.ts) are the entry, above all.
 * Every folder of src/ must be listed: a new folder has to be given its place.
 */
export const LAYERS = [
  ['base'],
  ['hami'],
  ['devices'],
  ['config'],
  ['kube'],
  ['lock'],
  ['telemetry'],
  ['cluster'],
  ['admission', 'extender', 'sweeper'],
  ['tls'],
  ['lifecycle'],
  ['server'],
  ['serve'],
  ['explain'],
  ['local'],
  ['commands'],
];
const ENTRY = '(entry)';

/** The layer index of a src/ folder (ENTRY: last), or undefined for a folder not in LAYERS. */
const layerOf = (folder) =>
  folder === ENTRY
    ? LAYERS.length
    : (() => {
        const index = LAYERS.findIndex((layer) => layer.includes(folder));
        return index < 0 ? undefined : index;
      })();

/** The first folder under src/ of a path inside it, or ENTRY for a file directly in src/. */
const srcFolderOf = (target) => {
  const parts = relative(srcDir, target).split(/[\\/]/);
  return parts.length === 1 ? ENTRY : parts[0];
};

/** Checks every module specifier (relativeSpecifiers) against LAYERS. */
const layeredImports = {
  meta: {
    type: 'problem',
    docs: { description: 'imports in src/ follow the layer table: only earlier layers, features never each other' },
    schema: [],
    messages: {
      upward:
        '"{{specifier}}" reaches {{target}}/, a layer above {{folder}}/ (docs/architecture.md, "Layers"): move the shared part down, or invert the dependency through a port.',
      sibling:
        '"{{specifier}}" reaches {{target}}/, which shares a layer with {{folder}}/: features never import each other; move the shared part to a layer below both.',
      unlisted: '{{folder}}/ is not in the layer table (LAYERS in eslint.config.js): give it its place.',
    },
  },
  create(context) {
    if (!within(srcDir, context.filename)) return {};
    const folder = srcFolderOf(context.filename);
    return relativeSpecifiers(context, (literal, specifier, resolved) => {
      if (!within(srcDir, resolved)) return;
      const target = srcFolderOf(resolved);
      if (target === folder) return;
      const [from, to] = [layerOf(folder), layerOf(target)];
      if (from === undefined) {
        context.report({ node: literal, messageId: 'unlisted', data: { folder } });
        return;
      }
      if (to === undefined) {
        context.report({ node: literal, messageId: 'unlisted', data: { folder: target } });
        return;
      }
      if (to > from) context.report({ node: literal, messageId: 'upward', data: { specifier, target, folder } });
      else if (to === from)
        context.report({ node: literal, messageId: 'sibling', data: { specifier, target, folder } });
    });
  },
};

export default tseslint.config(
  { ignores: ['dist/**', 'packages/*/dist/**', 'coverage/**', 'node_modules/**', 'webhook-certs/**'] },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true }],
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      // Express tells error middleware apart by its four parameters, so some must go unused.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      // @kubernetes/client-node models (V1Pod, V1Node, ...) are data-only classes that the API
      // itself fills from JSON; object literals are the intended way to build them.
      '@typescript-eslint/no-unsafe-class-instance-assignment': 'off',
      // For the same reason spreading one of those models loses nothing.
      '@typescript-eslint/no-misused-spread': 'off',
    },
  },
  {
    // The shape limits of the product's code, as errors: a change that breaks one fails `npm run lint`.
    // A long message is split with `+` at a phrase boundary; a long function is split into named steps.
    files: ['src/**/*.ts', 'packages/*/src/**/*.ts'],
    rules: {
      'max-len': ['error', { code: 120, ignoreUrls: true }],
      complexity: ['error', 20],
      'max-params': ['error', 5],
      'max-lines-per-function': ['error', { max: 100, skipBlankLines: true, skipComments: true }],
    },
  },
  {
    // Tests and benchmarks: the same line length, but a long string or template literal (an expected
    // message, a fixture) stays whole; a long regex is split with new RegExp(/a/.source + /b/.source).
    files: ['test/**/*.ts', 'bench/**/*.ts', 'packages/*/test/**/*.ts'],
    rules: {
      'max-len': ['error', { code: 120, ignoreUrls: true, ignoreStrings: true, ignoreTemplateLiterals: true }],
    },
  },
  {
    files: ['test/**/*.ts', 'packages/*/test/**/*.ts'],
    rules: {
      // chai's property assertions (expect(x).to.be.true) are expressions by design.
      '@typescript-eslint/no-unused-expressions': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
  {
    files: [`${STAND_INS}/**`, 'test/support/kubelet-sim/**'],
    plugins: { boundary: { rules: { 'no-src-imports': noSrcImports } } },
    rules: { 'boundary/no-src-imports': 'error' },
  },
  {
    files: ['src/**/*.ts'],
    plugins: {
      layers: { rules: { 'imports-follow-layers': layeredImports } },
      boundary: { rules: { 'stand-ins-only-lazily': standInsOnlyLazily } },
    },
    rules: { 'layers/imports-follow-layers': 'error', 'boundary/stand-ins-only-lazily': 'error' },
  },
  { files: ['eslint.config.js'], ...tseslint.configs.disableTypeChecked },
);
