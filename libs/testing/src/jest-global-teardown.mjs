import { tsImport } from 'tsx/esm/api';

const { default: teardown } = await tsImport('./global-teardown.ts', import.meta.url);
export default teardown;
