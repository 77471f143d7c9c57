package tokenserver;

import com.alibaba.csp.sentinel.cluster.flow.rule.ClusterFlowRuleManager;
import com.alibaba.csp.sentinel.cluster.server.ClusterTokenServer;
import com.alibaba.csp.sentinel.cluster.server.SentinelDefaultTokenServer;
import com.alibaba.csp.sentinel.cluster.server.config.ClusterServerConfigManager;
import com.alibaba.csp.sentinel.cluster.server.config.ServerTransportConfig;
import com.alibaba.csp.sentinel.slots.block.ClusterRuleConstant;
import com.alibaba.csp.sentinel.slots.block.RuleConstant;
import com.alibaba.csp.sentinel.slots.block.flow.ClusterFlowConfig;
import com.alibaba.csp.sentinel.slots.block.flow.FlowRule;

import java.util.Collections;

/**
 * Sentinel 1.8.9's own token server (alone mode), for the side-by-side figures: one namespace,
 * one cluster flow rule. Arguments: port namespace flowId count thresholdType. Prints
 * {@code ready} once started, then serves until killed.
 */
public final class SentinelTokenServer {

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        String namespace = args[1];
        long flowId = Long.parseLong(args[2]);
        double count = Double.parseDouble(args[3]);
        int thresholdType = Integer.parseInt(args[4]);

        ClusterServerConfigManager.loadGlobalTransportConfig(
            new ServerTransportConfig().setIdleSeconds(600).setPort(port));
        ClusterServerConfigManager.loadServerNamespaceSet(Collections.singleton(namespace));
        FlowRule rule = new FlowRule("token-server-interop").setGrade(RuleConstant.FLOW_GRADE_QPS).setCount(count);
        rule.setClusterMode(true);
        rule.setClusterConfig(new ClusterFlowConfig()
            .setFlowId(flowId)
            .setThresholdType(thresholdType == 1 ? ClusterRuleConstant.FLOW_THRESHOLD_GLOBAL
                : ClusterRuleConstant.FLOW_THRESHOLD_AVG_LOCAL));
        ClusterFlowRuleManager.loadRules(namespace, Collections.singletonList(rule));

        ClusterTokenServer server = new SentinelDefaultTokenServer();
        server.start();
        System.out.println("ready");
        System.out.flush();
        Thread.currentThread().join();
    }
}
