/** Does not compile: `langgraph.bad-ui.json` shows the bundling error at start. */
const Broken = () => <div>unclosed;

export default { broken: Broken };
