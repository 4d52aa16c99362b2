// Berth's own ESLint rules (the `berth/` prefix in eslint.config.mjs): conventions of this project
// that review alone kept until now. Each rule has its RuleTester test in tests/.
import noProcessEnv from './rules/no-process-env.mjs';
import statusWritesInMove from './rules/status-writes-in-move.mjs';

export default {
  meta: { name: 'berth' },
  rules: {
    'no-process-env': noProcessEnv,
    'status-writes-in-move': statusWritesInMove,
  },
};
