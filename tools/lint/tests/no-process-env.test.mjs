// berth/no-process-env: every way code reaches process.env is reported; a local named `process` is not it.
import { RuleTester } from 'eslint';
import rule from '../rules/no-process-env.mjs';

const tester = new RuleTester({ languageOptions: { ecmaVersion: 2024, sourceType: 'module' } });
const env = [{ messageId: 'env' }];

tester.run('berth/no-process-env', rule, {
  valid: [
    'const settings = loadEnv(); use(settings.PORT);',
    'function f(process) { return process.env.PORT; }',
    'const process = { env: {} }; use(process.env);',
    'use(process.argv, process.execPath, process.getuid());',
    'use(config.env.PORT);',
    "use('process.env.NODE_ENV');",
    "import { argv } from 'node:process'; use(argv);",
  ],
  invalid: [
    { code: 'use(process.env.PORT);', errors: env },
    { code: "use(process.env['PORT']);", errors: env },
    { code: "use(process['env'].PORT);", errors: env },
    { code: 'spawn(cmd, { env: { ...process.env, X: "1" } });', errors: env },
    { code: 'process.env.KEY = value;', errors: env },
    { code: 'use(globalThis.process.env.PORT);', errors: env },
    { code: 'const { env } = process; use(env.PORT);', errors: env },
    { code: "import { env } from 'node:process'; use(env.PORT);", errors: env },
    { code: "import process from 'node:process'; use(process.env.PORT);", errors: env },
  ],
});
