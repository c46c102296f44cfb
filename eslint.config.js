// @ts-check
import js from '@eslint/js'
import tseslint from 'typescript-eslint'

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'node_modules/**',
      'coverage/**',
      'agent/**',
      '.sbx/**',
      'test/tools/*/node_modules/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-empty-pattern': 'off',
    },
  },
  // The dependency rule (DESIGN.md §2, the aesthetics review §5.2): services own their contracts and
  // know no transport; http calls services and knows neither the composition root nor the BullMQ
  // driver; src/runtime wires services and leaves the HTTP server to src/cli; only the composition
  // root (src/cli, src/runtime itself) imports src/runtime. The file sets are disjoint because a later
  // no-restricted-imports entry replaces an earlier one.
  {
    files: ['src/services/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '(^|/)(http|runtime)/',
              message: 'src/services is transport-free: it imports neither src/http nor src/runtime',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['src/http/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '(^|/)runtime/',
              message: 'src/http calls services (src/services), not the composition root',
            },
            { regex: '(^|/)queue/bullmq/', message: "src/http does not know the queue driver's internals" },
          ],
        },
      ],
    },
  },
  {
    files: ['src/runtime/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '(^|/)http/',
              message: 'src/runtime wires services; the HTTP server is assembled in src/cli (serve.ts)',
            },
          ],
        },
      ],
    },
  },
  // One Redis home (src/redis/README.md): clients are built by role in src/redis/clients.ts only.
  {
    files: ['src/**/*.ts', 'providers/**/*.ts'],
    ignores: ['src/redis/**'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: "NewExpression[callee.name='Redis']",
          message: 'build Redis clients with createRedisClient(url, role, name) from src/redis',
        },
      ],
    },
  },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/cli/**', 'src/runtime/**', 'src/services/**', 'src/http/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { regex: '(^|/)runtime/', message: 'only the composition root (src/cli) imports src/runtime' },
          ],
        },
      ],
    },
  },
  // One execution-plane seam (src/sandbox/README.md, the aesthetics review §5.3): a provider imports
  // the service only through the provider SPI entry, src/sandbox/index.ts (`sandbox-router/provider`),
  // like a third-party provider would; everything else is its own folder or its SDK.
  {
    files: ['providers/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(\\.\\./)+src/(?!sandbox/index\\.js$)',
              message:
                "providers import the service only from '../../src/sandbox/index.js' (sandbox-router/provider)",
            },
          ],
        },
      ],
    },
  },
)
