// Type-aware lint for the whole project: sources, tests and benchmarks.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'coverage/**', 'node_modules/**', 'webhook-certs/**'] },
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
    files: ['test/**/*.ts'],
    rules: {
      // chai's property assertions (expect(x).to.be.true) are expressions by design.
      '@typescript-eslint/no-unused-expressions': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
  { files: ['eslint.config.js'], ...tseslint.configs.disableTypeChecked },
);
