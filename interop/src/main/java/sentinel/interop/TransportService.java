package sentinel.interop;

import com.alibaba.csp.sentinel.Entry;
import com.alibaba.csp.sentinel.SphU;
import com.alibaba.csp.sentinel.init.InitExecutor;
import com.alibaba.csp.sentinel.slots.block.BlockException;
import com.alibaba.csp.sentinel.slots.block.authority.AuthorityRule;
import com.alibaba.csp.sentinel.slots.block.authority.AuthorityRuleManager;
import com.alibaba.csp.sentinel.slots.block.degrade.DegradeRule;
import com.alibaba.csp.sentinel.slots.block.degrade.DegradeRuleManager;
import com.alibaba.csp.sentinel.slots.block.flow.FlowRule;
import com.alibaba.csp.sentinel.slots.block.flow.FlowRuleManager;
import com.alibaba.csp.sentinel.slots.block.flow.param.ParamFlowRule;
import com.alibaba.csp.sentinel.slots.block.flow.param.ParamFlowRuleManager;
import com.alibaba.csp.sentinel.slots.system.SystemRule;
import com.alibaba.csp.sentinel.slots.system.SystemRuleManager;
import com.alibaba.csp.sentinel.util.TimeUtil;
import com.alibaba.fastjson.JSON;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;

/**
 * The Java side of the transport golden test: Sentinel 1.8 with its own HTTP command center
 * (sentinel-transport-simple-http, on the port -Dcsp.sentinel.api.port names) and the
 * parameter flow control module, given rules and one call burst; the test then calls every
 * command on it and on the Rust transport and compares the answers.
 *
 * <pre>
 * TransportService RULES_DIR RESOURCE CALLS OTHER_RESOURCE
 *   RULES_DIR holds flow.json, degrade.json, system.json, authority.json, paramFlow.json
 *   (Sentinel JSON, the same files the Rust engine loads). Once the command center is up,
 *   CALLS calls to RESOURCE and one to OTHER_RESOURCE are made within one second; then
 *   "burst PASSED" is printed and the process serves commands until stdin closes.
 * </pre>
 */
public final class TransportService {
    private TransportService() {}

    private static String read(String dir, String name) throws Exception {
        return new String(Files.readAllBytes(Paths.get(dir, name)), StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws Exception {
        String dir = args[0];
        String resource = args[1];
        int calls = Integer.parseInt(args[2]);
        String other = args[3];
        FlowRuleManager.loadRules(JSON.parseArray(read(dir, "flow.json"), FlowRule.class));
        DegradeRuleManager.loadRules(JSON.parseArray(read(dir, "degrade.json"), DegradeRule.class));
        SystemRuleManager.loadRules(JSON.parseArray(read(dir, "system.json"), SystemRule.class));
        AuthorityRuleManager.loadRules(JSON.parseArray(read(dir, "authority.json"), AuthorityRule.class));
        ParamFlowRuleManager.loadRules(JSON.parseArray(read(dir, "paramFlow.json"), ParamFlowRule.class));
        // Starts the command center and the metric-log timer (SPI init functions).
        InitExecutor.doInit();
        // The burst inside one second: start early in a fresh second.
        while (TimeUtil.currentTimeMillis() % 1000 > 300) {
            Thread.sleep(5);
        }
        int passed = 0;
        for (int i = 0; i < calls; i++) {
            try {
                Entry entry = SphU.entry(resource);
                passed++;
                entry.exit();
            } catch (BlockException e) {
                // counted as a block by Sentinel itself
            }
        }
        try {
            SphU.entry(other).exit();
        } catch (BlockException e) {
            // no rule on it
        }
        System.out.println("burst " + passed);
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        while (in.readLine() != null) {
            // serve until stdin closes
        }
        System.exit(0);
    }
}
