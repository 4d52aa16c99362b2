/** The deployer port and its adapters (the contract suite in `contract.ts` is test support, not exported). */
export * from './deployer.js';
export * from './kubernetes/index.js';
