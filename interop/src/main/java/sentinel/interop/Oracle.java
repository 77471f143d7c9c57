package sentinel.interop;

import com.alibaba.csp.sentinel.AsyncEntry;
import com.alibaba.csp.sentinel.Constants;
import com.alibaba.csp.sentinel.CtSph;
import com.alibaba.csp.sentinel.EntryType;
import com.alibaba.csp.sentinel.ResourceTypeConstants;
import com.alibaba.csp.sentinel.SphU;
import com.alibaba.csp.sentinel.Tracer;
import com.alibaba.csp.sentinel.context.Context;
import com.alibaba.csp.sentinel.context.ContextUtil;
import com.alibaba.csp.sentinel.slots.block.AbstractRule;
import com.alibaba.csp.sentinel.slots.block.BlockException;
import com.alibaba.csp.sentinel.slots.block.authority.AuthorityException;
import com.alibaba.csp.sentinel.slots.block.authority.AuthorityRule;
import com.alibaba.csp.sentinel.slots.block.authority.AuthorityRuleManager;
import com.alibaba.csp.sentinel.slots.block.degrade.DegradeException;
import com.alibaba.csp.sentinel.slots.block.degrade.DegradeRule;
import com.alibaba.csp.sentinel.slots.block.degrade.DegradeRuleManager;
import com.alibaba.csp.sentinel.slots.block.flow.FlowException;
import com.alibaba.csp.sentinel.slots.block.flow.FlowRule;
import com.alibaba.csp.sentinel.slots.block.flow.FlowRuleManager;
import com.alibaba.csp.sentinel.slots.block.flow.FlowRuleUtil;
import com.alibaba.csp.sentinel.slots.block.flow.param.ParamFlowException;
import com.alibaba.csp.sentinel.slots.block.flow.param.ParamFlowRule;
import com.alibaba.csp.sentinel.slots.block.flow.param.ParamFlowRuleManager;
import com.alibaba.csp.sentinel.slots.block.flow.param.ParamFlowRuleUtil;
import com.alibaba.csp.sentinel.slots.block.flow.param.ParameterMetricStorage;
import com.alibaba.csp.sentinel.slots.clusterbuilder.ClusterBuilderSlot;
import com.alibaba.csp.sentinel.slots.system.SystemBlockException;
import com.alibaba.csp.sentinel.slots.system.SystemRule;
import com.alibaba.csp.sentinel.slots.system.SystemRuleManager;
import com.alibaba.csp.sentinel.util.TimeUtil;
import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONArray;
import com.alibaba.fastjson.JSONObject;
import com.alibaba.fastjson.serializer.SerializerFeature;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Deque;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.mockito.Mockito;
import org.mockito.MockedStatic;

/**
 * The Java side of the differential harness: runs scenario files through Sentinel 1.8 with
 * {@code TimeUtil.currentTimeMillis} frozen (as Sentinel's own {@code AbstractTimeBasedTest}
 * does) and writes one result file per scenario.
 *
 * <p>Usage: {@code Oracle OUT_DIR SCENARIO.json...}. All scenarios run in this one JVM; between
 * them every rule manager is emptied, Sentinel forgets every resource, context and param-flow
 * metric it has seen ({@link #forgetResources}), and the clock jumps two days ahead, so no
 * node, window, bucket or breaker of one scenario is seen by the next.
 */
public final class Oracle {
    /**
     * Where the first scenario's clock starts: a multiple of every window length used, and
     * far in the future (year 2106). Sentinel's own threads read the nodes on the real clock
     * (SystemStatusListener logs ENTRY_NODE's QPS when the machine's load is over a system
     * rule's threshold): a read at a time older than a bucket leaves the bucket alone, while
     * a read at a newer time would move it past the frozen scenario.
     */
    static final long BASE_MS = 3_600_000L * 1_200_000L;
    /** Between scenarios: a whole day, longer than any statistic Sentinel keeps. */
    static final long GAP_MS = 86_400_000L;

    private static final long[] NOW = {BASE_MS};
    private static final double[] LOAD = {0.0};
    private static final double[] CPU = {0.0};

    private Oracle() {}

    public static void main(String[] argv) throws Exception {
        if (argv.length < 1) {
            System.err.println("usage: Oracle OUT_DIR SCENARIO.json...");
            System.exit(2);
        }
        // Sentinel's metric-log timer reads every node's minute window from its own thread, on the
        // real clock: it would move buckets to real time under the frozen scenarios (a pass
        // counted in a detached bucket is lost), and the decisions would depend on when it ran.
        System.setProperty("csp.sentinel.metric.flush.interval", "0");
        Path out = Paths.get(argv[0]);
        Files.createDirectories(out);
        try (MockedStatic<TimeUtil> time = Mockito.mockStatic(TimeUtil.class);
             MockedStatic<SystemRuleManager> system =
                 Mockito.mockStatic(SystemRuleManager.class, Mockito.CALLS_REAL_METHODS)) {
            time.when(TimeUtil::currentTimeMillis).thenAnswer(call -> NOW[0]);
            system.when(SystemRuleManager::getCurrentSystemAvgLoad).thenAnswer(call -> LOAD[0]);
            system.when(SystemRuleManager::getCurrentCpuUsage).thenAnswer(call -> CPU[0]);
            long scenarioStart = BASE_MS;
            for (int i = 1; i < argv.length; i++) {
                Path file = Paths.get(argv[i]);
                String text = new String(Files.readAllBytes(file), StandardCharsets.UTF_8);
                NOW[0] = scenarioStart;
                JSONObject result = new Runner(scenarioStart).run(JSON.parseObject(text));
                String name = file.getFileName().toString();
                Files.write(out.resolve(name), JSON.toJSONString(result, SerializerFeature.PrettyFormat)
                    .getBytes(StandardCharsets.UTF_8));
                scenarioStart = NOW[0] - NOW[0] % GAP_MS + 2 * GAP_MS;
            }
        }
    }

    /** One held (not yet exited) entry. */
    private static final class Held {
        final AsyncEntry entry;
        final int batch;
        final Object[] args;

        Held(AsyncEntry entry, int batch, Object[] args) {
            this.entry = entry;
            this.batch = batch;
            this.args = args;
        }
    }

    /** Runs one scenario. */
    private static final class Runner {
        private final long start;
        private final Map<String, List<? extends AbstractRule>> loaded = new HashMap<>();
        private final Map<String, Deque<Held>> held = new LinkedHashMap<>();
        private final JSONArray outcomes = new JSONArray();
        /** Per load (`rules`, or the step's index): the order Sentinel checks each family in. */
        private final JSONObject checkOrder = new JSONObject(true);

        Runner(long start) {
            this.start = start;
        }

        JSONObject run(JSONObject scenario) throws Exception {
            reset();
            forgetResources();
            LOAD[0] = 0.0;
            CPU[0] = 0.0;
            JSONObject rules = scenario.getJSONObject("rules");
            if (rules != null) {
                load("rules", rules);
            }
            JSONArray steps = scenario.getJSONArray("steps");
            for (int i = 0; i < steps.size(); i++) {
                step(i, steps.getJSONObject(i));
            }
            for (Deque<Held> queue : held.values()) {
                while (!queue.isEmpty()) {
                    Held h = queue.pollFirst();
                    h.entry.exit(h.batch, h.args);
                }
            }
            reset();
            JSONObject result = new JSONObject(true);
            result.put("name", scenario.getString("name"));
            result.put("outcomes", outcomes);
            result.put("checkOrder", checkOrder);
            return result;
        }

        private void reset() {
            FlowRuleManager.loadRules(Collections.emptyList());
            DegradeRuleManager.loadRules(Collections.emptyList());
            SystemRuleManager.loadRules(Collections.emptyList());
            AuthorityRuleManager.loadRules(Collections.emptyList());
            ParamFlowRuleManager.loadRules(Collections.emptyList());
        }

        private void load(String label, JSONObject rules) throws Exception {
            JSONObject order = new JSONObject(true);
            // The same parse Sentinel's JSON converters do: fastjson into the rule classes.
            // A blocking rule is named by its index among the valid rules of its family, as
            // the Rust runner names it among the rules its lenient conversion keeps.
            if (rules.containsKey("flow")) {
                List<FlowRule> list = parse(rules, "flow", FlowRule.class);
                loaded.put("flow", valid(list, FlowRuleUtil::isValidRule));
                FlowRuleManager.loadRules(list);
                // FlowSlot's rule provider: FlowRuleManager.getFlowRules(resource)
                Method rulesOf = FlowRuleManager.class.getDeclaredMethod("getFlowRules", String.class);
                rulesOf.setAccessible(true);
                List<FlowRule> checked = new ArrayList<>();
                for (FlowRule rule : list) {
                    if (rule == null || rule.getResource() == null) {
                        continue;
                    }
                    @SuppressWarnings("unchecked")
                    List<FlowRule> ofResource = (List<FlowRule>) rulesOf.invoke(null, rule.getResource());
                    for (FlowRule r : ofResource == null ? Collections.<FlowRule>emptyList() : ofResource) {
                        if (!checked.contains(r)) {
                            checked.add(r);
                        }
                    }
                }
                order.put("flow", positions(list, checked));
            }
            if (rules.containsKey("degrade")) {
                List<DegradeRule> list = parse(rules, "degrade", DegradeRule.class);
                loaded.put("degrade", valid(list, DegradeRuleManager::isValidRule));
                DegradeRuleManager.loadRules(list);
            }
            if (rules.containsKey("system")) {
                List<SystemRule> list = parse(rules, "system", SystemRule.class);
                SystemRuleManager.loadRules(list);
            }
            if (rules.containsKey("authority")) {
                List<AuthorityRule> list = parse(rules, "authority", AuthorityRule.class);
                loaded.put("authority", valid(list, AuthorityRuleManager::isValidRule));
                AuthorityRuleManager.loadRules(list);
            }
            if (rules.containsKey("paramFlow")) {
                List<ParamFlowRule> list = parse(rules, "paramFlow", ParamFlowRule.class);
                loaded.put("paramFlow", valid(list, ParamFlowRuleUtil::isValidRule));
                ParamFlowRuleManager.loadRules(list);
                List<ParamFlowRule> checked = new ArrayList<>();
                for (ParamFlowRule rule : list) {
                    if (rule != null && rule.getResource() != null) {
                        for (ParamFlowRule r : ParamFlowRuleManager.getRulesOfResource(rule.getResource())) {
                            if (!checked.contains(r)) {
                                checked.add(r);
                            }
                        }
                    }
                }
                order.put("paramFlow", positions(list, checked));
            }
            checkOrder.put(label, order);
        }

        /**
         * The positions in the payload {@code list} of the rules Sentinel checks, in the order
         * it checks them (per resource): each is the loaded object itself.
         */
        private static <T> JSONArray positions(List<T> list, List<T> checked) {
            JSONArray out = new JSONArray();
            for (T rule : checked) {
                for (int i = 0; i < list.size(); i++) {
                    if (list.get(i) == rule) {
                        out.add(i);
                    }
                }
            }
            return out;
        }

        private static <T> List<T> valid(List<T> list, java.util.function.Predicate<T> ok) {
            List<T> out = new ArrayList<>();
            for (T rule : list) {
                if (rule != null && ok.test(rule)) {
                    out.add(rule);
                }
            }
            return out;
        }

        private static <T> List<T> parse(JSONObject rules, String family, Class<T> type) {
            JSONArray array = rules.getJSONArray(family);
            if (array == null) {
                return new ArrayList<>();
            }
            return JSON.parseArray(array.toJSONString(), type);
        }

        private void step(int index, JSONObject step) throws Exception {
            String op = step.getString("op");
            switch (op) {
                case "advance":
                    NOW[0] += step.getLongValue("ms");
                    break;
                case "load":
                    load(Integer.toString(index), step.getJSONObject("rules"));
                    break;
                case "system":
                    if (step.containsKey("load")) {
                        LOAD[0] = step.getDoubleValue("load");
                    }
                    if (step.containsKey("cpu")) {
                        CPU[0] = step.getDoubleValue("cpu");
                    }
                    break;
                case "exit": {
                    Deque<Held> queue = held.get(step.getString("hold"));
                    int count = step.containsKey("count") ? step.getIntValue("count") : 1;
                    for (int k = 0; k < count && queue != null && !queue.isEmpty(); k++) {
                        Held h = queue.pollFirst();
                        if (step.getBooleanValue("error")) {
                            Tracer.traceEntry(new RuntimeException("scenario error"), h.entry);
                        }
                        h.entry.exit(h.batch, h.args);
                    }
                    break;
                }
                case "enter": {
                    int repeat = step.containsKey("repeat") ? step.getIntValue("repeat") : 1;
                    for (int k = 0; k < repeat; k++) {
                        enter(index, k, step);
                    }
                    break;
                }
                default:
                    throw new IllegalArgumentException("step " + index + ": unknown op " + op);
            }
        }

        private void enter(int index, int rep, JSONObject step) throws Exception {
            String resource = step.getString("resource");
            String origin = step.containsKey("origin") ? step.getString("origin") : "";
            String context = step.containsKey("context") ? step.getString("context") : "sentinel_default_context";
            int batch = step.containsKey("batch") ? step.getIntValue("batch") : 1;
            EntryType type = step.getBooleanValue("inbound") ? EntryType.IN : EntryType.OUT;
            Object[] args = Args.toJava(step.getJSONArray("args"));
            JSONObject outcome = new JSONObject(true);
            outcome.put("step", index);
            outcome.put("rep", rep);
            outcome.put("at", NOW[0] - start);
            trueEnter(context, origin);
            AsyncEntry entry = null;
            try {
                entry = SphU.asyncEntry(resource, ResourceTypeConstants.COMMON, type, batch, args);
                outcome.put("result", "pass");
            } catch (BlockException e) {
                outcome.put("result", describe(e));
            } finally {
                ContextUtil.exit();
            }
            outcomes.add(outcome);
            if (entry == null) {
                return;
            }
            if (step.containsKey("hold")) {
                held.computeIfAbsent(step.getString("hold"), h -> new ArrayDeque<>())
                    .addLast(new Held(entry, batch, args));
                return;
            }
            NOW[0] += step.getLongValue("rt");
            if (step.getBooleanValue("error")) {
                Tracer.traceEntry(new RuntimeException("scenario error"), entry);
            }
            entry.exit(batch, args);
        }

        private String describe(BlockException e) {
            if (e instanceof SystemBlockException) {
                return "block:system:" + ((SystemBlockException) e).getLimitType();
            }
            String family;
            if (e instanceof FlowException) {
                family = "flow";
            } else if (e instanceof DegradeException) {
                family = "degrade";
            } else if (e instanceof AuthorityException) {
                family = "authority";
            } else if (e instanceof ParamFlowException) {
                family = "paramFlow";
            } else {
                family = e.getClass().getSimpleName();
            }
            return "block:" + family + "#" + indexOf(family, e.getRule());
        }

        private int indexOf(String family, AbstractRule rule) {
            List<? extends AbstractRule> list = loaded.get(family);
            if (list == null || rule == null) {
                return -1;
            }
            for (int i = 0; i < list.size(); i++) {
                if (list.get(i) == rule) {
                    return i;
                }
            }
            for (int i = 0; i < list.size(); i++) {
                if (list.get(i).equals(rule)) {
                    return i;
                }
            }
            return -1;
        }
    }

    /**
     * Forgets every resource Sentinel has seen, through the hooks Sentinel's own tests reset it
     * with: the slot chains (and with them each chain's per-context nodes), the resources'
     * cluster nodes, the contexts, the param-flow metrics and the global inbound node's
     * windows. Without this a relate rule sees its related resource's node made by an earlier
     * scenario (Sentinel passes a relate rule whose resource was never entered), so an outcome
     * depended on the scenarios run before it.
     */
    static void forgetResources() throws Exception {
        invokeHidden(CtSph.class, "resetChainMap");
        ClusterBuilderSlot.getClusterNodeMap().clear();
        Constants.ROOT.removeChildList();
        // the default context's node again, under ROOT
        invokeHidden(ContextUtil.class, "resetContextMap");
        ((Map<?, ?>) invokeHidden(ParameterMetricStorage.class, "getMetricsMap")).clear();
        Constants.ENTRY_NODE.reset();
    }

    /** Calls a package-private static method without arguments (a test hook of Sentinel's). */
    private static Object invokeHidden(Class<?> type, String name) throws Exception {
        Method method = type.getDeclaredMethod(name);
        method.setAccessible(true);
        return method.invoke(null);
    }

    private static Method trueEnter;

    /** {@code ContextUtil.enter} refuses the default context's name; its inner method does not. */
    static Context trueEnter(String name, String origin) throws Exception {
        if (trueEnter == null) {
            trueEnter = ContextUtil.class.getDeclaredMethod("trueEnter", String.class, String.class);
            trueEnter.setAccessible(true);
        }
        return (Context) trueEnter.invoke(null, name, origin);
    }
}
