package tokenserver;

import com.alibaba.csp.sentinel.Entry;
import com.alibaba.csp.sentinel.SphU;
import com.alibaba.csp.sentinel.cluster.ClusterStateManager;
import com.alibaba.csp.sentinel.cluster.TokenResult;
import com.alibaba.csp.sentinel.cluster.TokenResultStatus;
import com.alibaba.csp.sentinel.cluster.client.ClientConstants;
import com.alibaba.csp.sentinel.cluster.client.ClusterTokenClient;
import com.alibaba.csp.sentinel.cluster.client.TokenClientProvider;
import com.alibaba.csp.sentinel.cluster.client.config.ClusterClientAssignConfig;
import com.alibaba.csp.sentinel.cluster.client.config.ClusterClientConfig;
import com.alibaba.csp.sentinel.cluster.client.config.ClusterClientConfigManager;
import com.alibaba.csp.sentinel.slots.block.BlockException;
import com.alibaba.csp.sentinel.slots.block.RuleConstant;
import com.alibaba.csp.sentinel.slots.block.ClusterRuleConstant;
import com.alibaba.csp.sentinel.slots.block.flow.ClusterFlowConfig;
import com.alibaba.csp.sentinel.slots.block.flow.FlowRule;
import com.alibaba.csp.sentinel.slots.block.flow.FlowRuleManager;

import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * A Java service in Sentinel's token-client mode, offering a paced load to one cluster flow
 * rule and printing, for every second of the run, what it admitted.
 *
 * <p>Arguments (key=value): host, port, flowId, count (the rule's count), thresholdType
 * (1 global, 0 average per client), rate (calls offered per second), seconds (run length),
 * threads (workers, default 4), mode ({@code entry}: {@code SphU.entry} on the cluster rule,
 * as a service does; {@code token}: the token client's {@code requestToken} directly, so a
 * failed request is seen as such), fallback ({@code fallbackToLocalWhenFail}, default false),
 * timeoutMs (the client's request timeout, default 200).
 *
 * <p>Once {@code ready} is printed, the run starts at the second read from stdin as
 * {@code go <epoch-second>} (or the next second if stdin closes).
 *
 * <p>Output on stdout: {@code ready} once the client is connected, then one line per second
 * {@code second <epoch-second> pass <n> block <n> fail <n>} (fail: mode token only, any status
 * other than OK and BLOCKED), then {@code done}. Set the namespace with -Dproject.name.
 */
public final class TokenClientLoad {

    public static void main(String[] args) throws Exception {
        Map<String, String> o = new HashMap<>();
        for (String arg : args) {
            int eq = arg.indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("expected key=value, got " + arg);
            }
            o.put(arg.substring(0, eq), arg.substring(eq + 1));
        }
        String host = o.getOrDefault("host", "127.0.0.1");
        int port = Integer.parseInt(o.getOrDefault("port", "18730"));
        long flowId = Long.parseLong(o.getOrDefault("flowId", "1"));
        double count = Double.parseDouble(o.getOrDefault("count", "100"));
        int thresholdType = Integer.parseInt(o.getOrDefault("thresholdType", "1"));
        double rate = Double.parseDouble(o.getOrDefault("rate", "100"));
        int seconds = Integer.parseInt(o.getOrDefault("seconds", "5"));
        int threads = Integer.parseInt(o.getOrDefault("threads", "4"));
        boolean tokenMode = "token".equals(o.getOrDefault("mode", "entry"));
        boolean fallback = Boolean.parseBoolean(o.getOrDefault("fallback", "false"));
        int timeoutMs = Integer.parseInt(o.getOrDefault("timeoutMs", "200"));
        String resource = "token-server-interop";

        ClusterClientConfigManager.applyNewConfig(new ClusterClientConfig().setRequestTimeout(timeoutMs));
        ClusterClientConfigManager.applyNewAssignConfig(new ClusterClientAssignConfig(host, port));
        ClusterStateManager.applyState(ClusterStateManager.CLUSTER_CLIENT);

        FlowRule rule = new FlowRule(resource).setGrade(RuleConstant.FLOW_GRADE_QPS).setCount(count);
        rule.setClusterMode(true);
        rule.setClusterConfig(new ClusterFlowConfig()
            .setFlowId(flowId)
            .setThresholdType(thresholdType == 1 ? ClusterRuleConstant.FLOW_THRESHOLD_GLOBAL
                : ClusterRuleConstant.FLOW_THRESHOLD_AVG_LOCAL)
            .setFallbackToLocalWhenFail(fallback));
        FlowRuleManager.loadRules(Collections.singletonList(rule));

        long connectDeadline = System.currentTimeMillis() + 30_000;
        while (true) {
            ClusterTokenClient client = TokenClientProvider.getClient();
            if (client != null && client.getState() == ClientConstants.CLIENT_STATUS_STARTED) {
                // The first answered request proves the whole path (PING done, server deciding).
                TokenResult probe = client.requestToken(flowId, 1, false);
                if (probe != null && (probe.getStatus() == TokenResultStatus.OK
                    || probe.getStatus() == TokenResultStatus.BLOCKED)) {
                    break;
                }
            }
            if (System.currentTimeMillis() > connectDeadline) {
                System.out.println("error: no answer from the token server at " + host + ":" + port);
                System.exit(2);
            }
            Thread.sleep(50);
        }
        // The first entry initialises Sentinel's slot chain (seconds on a cold JVM): before the run.
        long warm = System.currentTimeMillis();
        enter(resource);
        System.out.println("warm-up " + (System.currentTimeMillis() - warm) + " ms");
        System.out.println("ready");
        System.out.flush();

        // Start on a second boundary, so that every printed second is a whole one: the one
        // given on stdin as "go <epoch-second>" (so that several processes start together),
        // or the next one when stdin is closed.
        String go = new java.io.BufferedReader(new java.io.InputStreamReader(System.in)).readLine();
        long next = (System.currentTimeMillis() / 1000 + 1) * 1000;
        final long start = go != null && go.startsWith("go ")
            ? Math.max(next, Long.parseLong(go.substring(3).trim()) * 1000)
            : next;
        long end = start + seconds * 1000L;
        int slots = seconds + 2;
        AtomicLongArray pass = new AtomicLongArray(slots);
        AtomicLongArray block = new AtomicLongArray(slots);
        AtomicLongArray fail = new AtomicLongArray(slots);
        double perThread = rate / threads;
        long periodNanos = (long) (1_000_000_000L / perThread);

        Thread[] workers = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            final long offset = periodNanos * t / threads;
            workers[t] = new Thread(() -> {
                sleepUntil(start);
                long due = System.nanoTime() + offset;
                while (true) {
                    long now = System.nanoTime();
                    if (due > now) {
                        sleepNanos(due - now);
                    } else if (now - due > 100_000_000L) {
                        // Far behind (a starved JVM): do not burst more than 100 ms of calls.
                        due = now - 100_000_000L;
                    }
                    due += periodNanos;
                    long millis = System.currentTimeMillis();
                    if (millis >= end) {
                        return;
                    }
                    int outcome = tokenMode ? requestToken(flowId) : enter(resource);
                    int slot = (int) ((System.currentTimeMillis() - start) / 1000);
                    if (slot < 0 || slot >= slots) {
                        continue;
                    }
                    if (outcome == 0) {
                        pass.incrementAndGet(slot);
                    } else if (outcome == 1) {
                        block.incrementAndGet(slot);
                    } else {
                        fail.incrementAndGet(slot);
                    }
                }
            }, "load-" + t);
            workers[t].setDaemon(true);
            workers[t].start();
        }
        for (Thread w : workers) {
            w.join();
        }
        for (int s = 0; s < seconds; s++) {
            System.out.println("second " + (start / 1000 + s) + " pass " + pass.get(s) + " block "
                + block.get(s) + " fail " + fail.get(s));
        }
        FAILS.forEach((status, n) -> System.out.println("fail-status " + status + " " + n.sum()));
        System.out.println("done");
        System.out.flush();
        System.exit(0);
    }

    /** Token mode: the statuses other than OK and BLOCKED, by code (printed at the end). */
    private static final java.util.concurrent.ConcurrentHashMap<Integer, java.util.concurrent.atomic.LongAdder>
        FAILS = new java.util.concurrent.ConcurrentHashMap<>();

    private static int requestToken(long flowId) {
        TokenResult r = TokenClientProvider.getClient().requestToken(flowId, 1, false);
        if (r == null) {
            return 2;
        }
        if (r.getStatus() != TokenResultStatus.OK && r.getStatus() != TokenResultStatus.BLOCKED) {
            FAILS.computeIfAbsent(r.getStatus(), k -> new java.util.concurrent.atomic.LongAdder()).increment();
        }
        switch (r.getStatus()) {
            case TokenResultStatus.OK:
                return 0;
            case TokenResultStatus.BLOCKED:
                return 1;
            default:
                return 2;
        }
    }

    private static int enter(String resource) {
        Entry entry = null;
        try {
            entry = SphU.entry(resource);
            return 0;
        } catch (BlockException e) {
            return 1;
        } finally {
            if (entry != null) {
                entry.exit();
            }
        }
    }

    private static void sleepUntil(long epochMillis) {
        long left;
        while ((left = epochMillis - System.currentTimeMillis()) > 0) {
            sleepNanos(left * 1_000_000L);
        }
    }

    private static void sleepNanos(long nanos) {
        try {
            Thread.sleep(nanos / 1_000_000L, (int) (nanos % 1_000_000L));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
